// Package outbox carries a critical section's effects that no store
// checks (an email, a charge, a webhook call, a published event) out of
// it once, and never from a deposed holder.
//
// Fencing stops at the store: a write with a stale token is refused, but
// an email sent by a holder paused past its lease is not. So an effect is
// not sent from the critical section; it is recorded, as an [Effect], in
// the same fenced write as the state change it belongs to, and exists if
// and only if that write landed. Each store's adapter records it (fence/postgres's and
// fence/sql's Outbox.Record in the fenced transaction; fence/etcd's,
// fence/redis's and fence/dynamodb's Outbox.Update in the same atomic write) and implements
// [Log], what a dispatcher reads:
//
//	err := postgres.RunInTx(ctx, pool, "order-42", lock.Token(), func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = $1", "order-42"); err != nil {
//			return err
//		}
//		return ob.Record(ctx, tx, outbox.Effect{Resource: "order-42", Token: lock.Token(), Seq: 0,
//			Destination: "https://mail.internal/send", Payload: email})
//	})
//
// A [Dispatcher], running while it holds a lock of its own (or a group's
// partition), delivers recorded effects at least once, in order per
// resource, through a [Sender] ([HTTPSender], fence/outbox/jetstream, a
// [SenderFunc]), and marks them with its own token in a write the store
// fences, so that a deposed dispatcher marks nothing:
//
//	d, err := outbox.NewDispatcher(ob, sender, outbox.WithName("mail"))
//	...
//	err = d.Run(ctx, dispatcherLock, outbox.All) // until the lock is lost or ctx ends
//
// Every delivery carries the effect's idempotency key ([Effect.Key]),
// derived from its resource, token and sequence: the same on each retry,
// never the same for two effects. A receiver deduplicates on it and
// refuses an older token for the same resource; [NewReceiver] is that
// middleware for HTTP services, over any fenced store, and
// fence/outbox/outboxgrpc the interceptor for gRPC.
//
// [MemoryLog] is a log in memory for tests and examples;
// fence/outbox/outboxtest is the conformance suite every store's log
// passes against its real server. docs/effects.md tells the whole story.
package outbox
