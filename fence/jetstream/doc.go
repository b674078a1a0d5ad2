// Package jsfence makes the entries of a NATS JetStream key-value bucket a
// fenced resource.
package jsfence
