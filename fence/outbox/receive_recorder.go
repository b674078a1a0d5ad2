package outbox

import "net/http"

// recorder passes a handler's answer through to the client and keeps a
// copy of it: the status, the headers to keep, and the body up to max
// bytes (one more tells that it was longer). Used by one handler's
// goroutine.
type recorder struct {
	http.ResponseWriter
	max  int
	keep []string // canonical names of the headers to keep

	status int
	header http.Header // the kept headers, as they were at WriteHeader
	body   []byte
	over   bool // the body was longer than max
	done   bool // the handler returned
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 && status >= 200 {
		r.snapshot(status)
	}
	r.ResponseWriter.WriteHeader(status)
}

// snapshot records status and the headers to keep as they are now.
func (r *recorder) snapshot(status int) {
	r.status = status
	r.header = make(http.Header)
	for _, k := range r.keep {
		if vs := r.ResponseWriter.Header().Values(k); len(vs) > 0 {
			r.header[k] = append([]string(nil), vs...)
		}
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if room := r.max - len(r.body); !r.over && len(b) > room {
		r.body = append(r.body, b[:max(room, 0)]...)
		r.over = true
	} else if !r.over {
		r.body = append(r.body, b...)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath (Flush,
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// answer returns what was recorded: a handler that wrote nothing
// answered 200 with no body.
func (r *recorder) answer() Answer {
	if r.status == 0 {
		r.snapshot(http.StatusOK) // net/http sends it when the handler returns
	}
	a := Answer{Status: r.status, Header: r.header, Body: r.body, Omitted: r.over}
	if a.Omitted {
		a.Body = nil
	}
	return a
}
