package s3fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate reads the object under key and claims it for token: from
// then on a write with a lower token is refused. It is the read to make
// before a write; see [fence.Updater] for the contract. It reads the whole
// object (value, token and ETag in one GET) and then, by the token there:
//
//   - higher: it refuses with a *[fence.StaleError] (Current set), and
//     writes nothing.
//   - the same: the key is claimed already; it returns the record.
//   - lower: it rewrites the same value under token, with its Content-Type
//     and user metadata (other settings come from [WithPutDefaults]), in a
//     PutObject conditional on the ETag read (If-Match), and returns the
//     record with token. The rewrite costs a PUT of the whole object, once
//     per holder and key: its next calls find the key claimed.
//   - no object, or a tombstone left by [Store.Delete]: it writes a
//     tombstone with token (If-None-Match: *, or If-Match), and returns an
//     error matching [fence.ErrNotFound]. [Store.Get] still says not found.
//
// When another writer changes the object between the read and the
// rewrite, it reads and decides again, up to [fence.UpdateAttempts] times,
// and then fails with an error matching [ErrConflict] (and
// [fence.ErrConflict]). A rewrite that got no answer is decided as a
// Put's is, by reading back: nil if it landed, else an error matching
// [fence.ErrUnknownOutcome] (the claim may still land, which raises the
// floor to token and changes nothing else). Other errors are those of
// [Store.Get] and [Store.Put], the checks of arguments before any I/O
// included; ctx bounds the calls as it does Put's.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, tw := s.tel.claim.Start(ctx, token)
	if tw.Recording() {
		tw.SetResource(key)
	}
	var sn snapshot
	err := s.rounds(ctx, key, func() (refused bool, err error) {
		sn, refused, err = s.claim(ctx, key, token)
		return refused, err
	})
	tw.End(err)
	switch {
	case err != nil:
		return fence.Record{}, err
	case !sn.hasValue():
		return fence.Record{}, fmt.Errorf("%w: s3://%s/%s: no value; claimed with token %d", fence.ErrNotFound, s.bucket, key, token)
	}
	return sn.record(token), nil
}

// Update is a read-modify-write of the object under key with token, atomic
// against a late write of an older holder and against writers with the
// same token; see [fence.Updater] for the contract. Each round claims the
// key as [Store.GetForUpdate] does (a higher token refuses it with a
// *[fence.StaleError] before fn runs), passes the record to fn (the zero
// Record when the key has no value), and writes fn's value under token in a
// PutObject conditional on the ETag of the version the claim read or wrote.
// If the object changed in between (412, 409), the next round reads again
// and calls fn again, up to [fence.UpdateAttempts] rounds, and then Update
// fails with an error matching [ErrConflict] (and [fence.ErrConflict]).
//
// The claim lands before fn sees the record, rather than the final write
// being the claim: conditional on the ETag read, that write alone would
// lose no update (an older holder's write landing after the read changes
// the ETag, the write is refused, and the next round reads that write and
// builds on it), but the older write would have been accepted after this
// holder read the key, which the first-touch rule of [fence.Updater]
// forbids, and fn would have acted on a record that was no longer the
// key's. The claim costs a PUT only when the token rises.
//
// fn's error is returned as it is, and a panic in fn is passed on; the
// value is not written either way, but the claim stays. A final write that
// got no answer is decided as a Put's is, by reading back: nil if it
// landed, else an error matching [fence.ErrUnknownOutcome] (it may still
// land; read before deciding). The write uses the Store's
// [WithPutDefaults]; for settings of its own, use GetForUpdate and
// [Store.PutWith]. Other errors, and the role of ctx, are GetForUpdate's;
// a nil fn is refused with [ErrInvalidArgument] before any I/O.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkCall(ctx, key); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Update: nil function", ErrInvalidArgument)
	}
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*updateRounds)(s), key, token, fn)
}

// rounds runs round, one read–decide–write of GetForUpdate, until
// it is not refused, at most fence.UpdateAttempts times, waiting between
// rounds as Put's loop does.
func (s *Store) rounds(ctx context.Context, key string, round func() (refused bool, err error)) error {
	for n := 1; ; n++ {
		refused, err := round()
		switch {
		case !refused:
			return err
		case n == fence.UpdateAttempts:
			return fmt.Errorf("%w: s3://%s/%s, %d conditional PUTs refused: %w", ErrConflict, s.bucket, key, n, err)
		}
		if err := s.backoff(ctx, key, n); err != nil {
			return err
		}
		s.tel.reread(ctx)
	}
}

// claim is one round of GetForUpdate: it reads the object whole and, if
// its token is below token, rewrites it under token (the same value, or a
// tombstone) conditional on the version read. refused reports that the
// object changed after the read (err is the refusal). Otherwise, on
// success, sn is the object as it is now.
func (s *Store) claim(ctx context.Context, key string, token fence.Token) (sn snapshot, refused bool, err error) {
	if sn, err = s.snapshot(ctx, key); err != nil {
		return snapshot{}, false, err
	}
	switch {
	case sn.exists && sn.v.hdr.token > token:
		return snapshot{}, false, s.stale(key, token, sn.v)
	case sn.exists && sn.v.hdr.token == token:
		return sn, false, nil // claimed already, by this holder or one with its token
	}
	w, err := s.newWrite(key, header{token: token, deleted: !sn.hasValue()}, bytes.NewReader(sn.value), sn.meta.options())
	if err != nil {
		return snapshot{}, false, err
	}
	if refused, err = s.send(ctx, w, sn.v, sn.exists); refused || err != nil {
		return snapshot{}, refused, err
	}
	sn.v, sn.exists = version{etag: w.etag, hdr: w.hdr}, true
	return sn, false, nil
}

// send is one attempt of Put's loop for a round of GetForUpdate or
// Update: w's conditional write, based on v, after the Store's check of
// conditional writes. A write that did not land aborts its multipart
// upload, since a next round writes anew.
func (s *Store) send(ctx context.Context, w *write, v version, exists bool) (refused bool, err error) {
	if err := s.ensureConditional(ctx, w.mp != nil); err != nil {
		return false, err
	}
	refused, err = s.attempt(ctx, w, v, exists)
	if err != nil {
		s.abortUpload(ctx, w)
	}
	return refused, err
}

// snapshot is an object as one whole read saw it.
type snapshot struct {
	v      version
	exists bool   // an object is there, a tombstone included
	value  []byte // nil for no object and for a tombstone
	meta   objectMeta
}

// hasValue reports whether the object holds a value: it is there, and not
// a tombstone.
func (sn snapshot) hasValue() bool { return sn.exists && !sn.v.hdr.deleted }

// record is the object's record as claimed with token: the zero Record
// when it holds no value.
func (sn snapshot) record(token fence.Token) fence.Record {
	if !sn.hasValue() {
		return fence.Record{}
	}
	return fence.Record{Value: sn.value, Token: token}
}

// snapshot reads the object under key whole.
func (s *Store) snapshot(ctx context.Context, key string) (snapshot, error) {
	r, v, err := s.open(ctx, key)
	switch {
	case r == nil && errors.Is(err, fence.ErrNotFound):
		return snapshot{}, nil
	case err != nil:
		return snapshot{}, err
	}
	defer r.Close()
	if v.etag == "" {
		return snapshot{}, s.failure("get", key, errNoETag)
	}
	sn := snapshot{v: v, exists: true, meta: r.meta}
	if !v.hdr.deleted {
		if sn.value, err = readValue(r); err != nil {
			return snapshot{}, s.failure("get", key, err)
		}
	}
	return sn, nil
}

// objectMeta is what a claim carries over to the object it rewrites,
// besides the value: the settings that describe the value.
type objectMeta struct {
	contentType *string
	metadata    map[string]string
}

// options returns m as PutOptions, without the Store's own metadata
// ([MetadataToken]), which the rewrite sets anew.
func (m objectMeta) options() []PutOption {
	var opts []PutOption
	if m.contentType != nil {
		opts = append(opts, WithContentType(*m.contentType))
	}
	meta := maps.Clone(m.metadata)
	maps.DeleteFunc(meta, func(k, _ string) bool { return strings.EqualFold(k, MetadataToken) })
	if len(meta) > 0 {
		opts = append(opts, WithMetadata(meta))
	}
	return opts
}
