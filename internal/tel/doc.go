// Package tel is the OpenTelemetry plumbing the library's packages share,
// through the OpenTelemetry API only (no SDK, no exporter):
//
//   - [Tracer], used by etcdlock and the fenced-write adapters alike,
//     starts no span while OpenTelemetry's global tracer provider has no
//     SDK set, so an uninstrumented program pays no allocation and no
//     context layer per call.
//   - [New] instruments fenced writes for the storage adapters
//     (fence/postgres, fence/s3) and for the writes a fence.Guard refuses
//     locally (etcdlock): a span per write, child of the caller's context,
//     carrying the token; the writes by adapter, operation and outcome
//     ([WritesMetric]); and their duration.
//
// Everything a write reports with is built once, in [New]: span names,
// start options and the attribute sets of each (operation, outcome). A
// write that no SDK records costs a span start on the no-op tracer and two
// no-op measurements, with no allocation of its own.
//
// The package was writetel while it held the write instruments only; it is
// tel (telemetry) since it holds the generic tracer too, so that its name
// covers both and neither etcdlock's spans nor the adapters' writes look
// borrowed from the other.
package tel
