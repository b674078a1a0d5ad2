package pgadvisory

import "time"

// SessionTimeoutOf returns the idle_session_timeout l's deadline counts.
func SessionTimeoutOf(l *Lock) time.Duration { return l.timeout }
