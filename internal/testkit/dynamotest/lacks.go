package dynamotest

import "testing"

// Lack is something DynamoDB does that a compatible server does not: the
// one list of them. A test that cannot pass without one calls
// [Server.Need]; a test shows each one on the server said to lack it
// (fence/dynamodb's TestServerLacks).
type Lack struct {
	// What the server does instead of what DynamoDB does.
	What string
}

// The lacks of the servers this package starts.
var (
	// NoTransactions: TransactWriteItems is refused with
	// UnknownOperationException (400), so Store.UpdateAll and Transact
	// are refused, nothing written.
	NoTransactions = Lack{What: "no TransactWriteItems (UnknownOperationException): UpdateAll and Transact are refused, nothing written"}
	// NoItemOnConditionFailure: ReturnValuesOnConditionCheckFailure is
	// ignored, so a refusal carries no item: a StaleError's Current is
	// 0, and Update reads the item back to recognise its own write.
	NoItemOnConditionFailure = Lack{What: "no item with ConditionalCheckFailed (ReturnValuesOnConditionCheckFailure ignored)"}
)

// lacks lists, per server name, what it lacks.
var lacks = map[string][]*Lack{
	"minidyn":  nil,
	"dynalite": {&NoTransactions, &NoItemOnConditionFailure},
}

// Lacks reports whether s lacks l. An endpoint named by
// FENCELOCK_DYNAMODB_ENDPOINT is taken to lack nothing.
func (s *Server) Lacks(l *Lack) bool {
	for _, x := range lacks[s.name] {
		if x == l {
			return true
		}
	}
	return false
}

// Lacking returns what s lacks.
func (s *Server) Lacking() []*Lack { return lacks[s.name] }

// SkipMark begins the message of every skip by [Server.Need]: a run that
// must skip nothing else looks for it.
const SkipMark = "dynamotest: server lacks"

// Need skips t when s lacks l, saying so: the one way a test leaves a
// server out.
func (s *Server) Need(t testing.TB, l *Lack) {
	t.Helper()
	if s.Lacks(l) {
		t.Skipf("%s (%s): %s", SkipMark, s.name, l.What)
	}
}
