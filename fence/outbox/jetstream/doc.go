// Package jetstream delivers an outbox's effects to NATS JetStream: a
// [Sender] publishes each [outbox.Effect]'s Payload to the subject its
// Destination names, with the effect's [outbox.Effect.Key] as the
// message's Nats-Msg-Id, so that the stream stores a redelivery within its
// duplicate window once (JetStream's own deduplication), and waits for
// the stream's acknowledgement.
//
//	nc, err := nats.Connect(url)
//	...
//	js, err := natsjs.New(nc) // github.com/nats-io/nats.go/jetstream
//	...
//	s, err := jetstream.NewSender(js)
//	...
//	d, err := outbox.NewDispatcher(log, s)
//
// Each message carries three headers: Nats-Msg-Id and Idempotency-Key,
// both the effect's key, and Fencing-Token, the effect's resource and
// token in fence/propagate's format, so that a consumer can deduplicate
// beyond the stream's window (outbox.Receipts) and fence its own writes.
//
// A stream's duplicate window (its Duplicates setting, two minutes by
// default) bounds JetStream's deduplication: a redelivery after it, such
// as an operator's requeue of a parked effect, is stored again. Consumers
// that must apply an effect once deduplicate on the key themselves.
//
// This package alone, in this module, imports the NATS client, so that a
// program that does not use JetStream does not compile it.
package jetstream
