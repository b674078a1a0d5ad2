// Package propagate carries a lock's name and fencing token with the calls
// its holder makes to other services, the way trace context is carried,
// so that a service that writes on the holder's behalf fences its own
// writes with the holder's token.
//
// Often the holder of a lock does not write the resource itself: it calls
// a service (HTTP, gRPC) that does. Without the token the service cannot
// tell a paused holder's late call from the current holder's; with it, the
// service's storage refuses the late write as it would refuse the holder's
// own ([fence.Store], fence/postgres).
//
// On the caller's side, put the lock's [Fencing] in the context, and send
// calls with it through a [Transport]:
//
//	ctx, err := propagate.NewContext(ctx, propagate.FencingOf(lock.Name(), lock))
//	...
//	client := &http.Client{Transport: &propagate.Transport{}}
//	resp, err := client.Do(req.WithContext(ctx)) // sends Fencing-Token: name="invoice-42"; token=812
//	...
//	if err := propagate.CheckResponse(resp); errors.Is(err, fence.ErrStale) {
//		// The service refused the write: a newer holder has written.
//	}
//
// On the service's side, [NewHandler] parses the header into the
// request's context (refusing, with 400 and before the handler runs, a
// call without one or with one that does not parse), the handler reads it
// with [FromContext] and writes with it, and [WriteStale] answers a stale
// write with 409:
//
//	h, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		f, _ := propagate.FromContext(r.Context())
//		if f.Name != id { // the lock that guards the account is named after it
//			http.Error(w, "not the account's lock", http.StatusForbidden)
//			return
//		}
//		_, err := postgres.Exec(r.Context(), pool, id, f.Token, "UPDATE ledger_balances SET balance = $1 WHERE id = $2", b, id)
//		if propagate.WriteStale(w, err) {
//			return
//		}
//		...
//	}))
//
// When the lock names its tokens' issuer ([fence.IssuerNamer]; FencingOf
// takes it), the call carries it too, and [NewHandler] and the gRPC server
// interceptors put it in the request's context
// ([fence.ContextWithIssuer]), so that a store that checks issuers, or
// requires them ([fence.RequireIssuer]), checks the caller's.
//
// The header's format is in [Parse]. The gRPC client and server
// interceptors, which carry the same value in the "fencing-token"
// metadata entry, are in fence/propagate/fencegrpc, so that a program
// that uses only HTTP does not link gRPC.
//
// Fence on the resource the call writes, by the service's own name for it
// (the account above), and check that the call's lock is the one that
// guards it: fencing on whatever name a caller sends gives every name its
// own floor, and the holders of two locks would not fence each other out.
//
// What the token buys depends on the service's storage, as for the holder's
// own writes: it must refuse a write whose token is older than one it has
// accepted, in the write itself. A service that only checks the token and
// then writes has the holder's race again, one hop further. The service
// trusts its callers' tokens as it trusts their requests: a caller that
// can send any request can send any token (authenticate callers as for
// any other write).
//
// This package imports the standard library and package fence only (and
// the module's internal helpers).
package propagate
