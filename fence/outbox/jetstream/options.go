package jetstream

// Option configures [NewSender].
type Option interface {
	apply(*options)
}

type options struct {
	stream       string // WithExpectStream's; "" for any
	parkNoStream bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithExpectStream makes each publish name the stream that must store it
// (JetStream's Nats-Expected-Stream): a subject captured by another
// stream is refused by the server, and the effect parked. Default "":
// whichever stream captures the subject.
func WithExpectStream(stream string) Option {
	return optionFunc(func(o *options) { o.stream = stream })
}

// WithNoStreamRetried sets whether an effect whose subject no stream
// captures is retried (true) rather than parked at once (false, the
// default: a missing stream is most likely a configuration error, and
// parking names it). Retry where streams come and go, or where a
// clustered stream's leader election outlasts the client's own retries
// on "no responders".
func WithNoStreamRetried(retried bool) Option {
	return optionFunc(func(o *options) { o.parkNoStream = !retried })
}
