package check

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// errUndecided means porcupine's search ran out of time.
var errUndecided = errors.New("porcupine timed out: linearizability undecided")

// linearizeTimeout bounds porcupine's search for one resource.
const linearizeTimeout = 30 * time.Second

// regState is the fenced register: the value of the write with the highest
// token accepted so far.
type regState struct {
	Token int64
	Value string
}

// regInput is a write of Value with Token, or (Read) the final read.
type regInput struct {
	Read  bool
	Token int64
	Value string
}

// regOutput is a write's answer (accepted or refused as stale) or the
// value the final read saw.
type regOutput struct {
	Accepted bool
	Value    string
}

// registerModel is a register that accepts a write whose token is not
// lower than the highest it has accepted, and refuses the others.
var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch {
		case in.Read:
			return out.Value == s.Value, s
		case out.Accepted:
			return in.Token >= s.Token, regState{in.Token, in.Value}
		default:
			return in.Token < s.Token, s
		}
	},
	// Porcupine's page shows these as HTML: values are escaped.
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch {
		case in.Read:
			return html.EscapeString(fmt.Sprintf("read %q", out.Value))
		case out.Accepted:
			return html.EscapeString(fmt.Sprintf("write %s: accepted", in.Value))
		}
		return html.EscapeString(fmt.Sprintf("write %s: refused", in.Value))
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		if s.Value == "" {
			return "empty"
		}
		return html.EscapeString(fmt.Sprintf("token %d: %s", s.Token, s.Value))
	},
}

// illegalError is a history with no linearization; visual is porcupine's
// visualization of it, when it could make one.
type illegalError struct{ visual []byte }

func (*illegalError) Error() string {
	return "no linearization of the writes and the final read as a fenced register"
}

// checkLinearizable checks the attempts on one resource (the workers' reads
// and writes) against the fenced register, ending with a read of its final
// value. Writes without
// a definite answer count as accepted, open-ended, if storage holds them,
// and are left out otherwise; writes the guard refused never reached it.
func checkLinearizable(atts []Attempt, writes []Record, final string) error {
	stored := map[string]bool{}
	for _, w := range writes {
		stored[w.Value] = true
	}
	var ops []porcupine.Operation
	end := int64(0)
	for i, a := range atts {
		end = max(end, a.Call)
		if a.Return != math.MaxInt64 {
			end = max(end, a.Return)
		}
		if op, ok := operation(a, stored[a.Value]); ok {
			op.ClientId = i
			ops = append(ops, op)
		}
	}
	read := porcupine.Operation{ClientId: len(atts), Input: regInput{Read: true}, Output: regOutput{Value: final}, Call: end + 1, Return: end + 1}
	ops = append(ops, read)
	switch porcupine.CheckOperationsTimeout(registerModel, ops, linearizeTimeout) {
	case porcupine.Illegal:
		return &illegalError{visual: visualize(ops)}
	case porcupine.Unknown:
		return errUndecided
	}
	return nil
}

// visualize returns porcupine's visualization of a history it found
// illegal (the search again, keeping its partial linearizations), or nil.
func visualize(ops []porcupine.Operation) []byte {
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, linearizeTimeout)
	if res != porcupine.Illegal {
		return nil
	}
	var b bytes.Buffer
	if porcupine.Visualize(registerModel, info, &b) != nil {
		return nil
	}
	return b.Bytes()
}

func operation(a Attempt, stored bool) (porcupine.Operation, bool) {
	op := porcupine.Operation{Input: regInput{Token: a.Token, Value: a.Value}, Call: a.Call, Return: a.Return}
	if a.Read {
		op.Input, op.Output = regInput{Read: true}, regOutput{Value: a.Value}
		return op, true
	}
	switch a.Outcome {
	case OutOK:
		op.Output = regOutput{Accepted: true}
	case OutStale:
		op.Output = regOutput{Accepted: false}
	case OutUnknown, OutError:
		if !stored {
			return op, false
		}
		op.Output, op.Return = regOutput{Accepted: true}, math.MaxInt64
	default:
		return op, false
	}
	return op, true
}
