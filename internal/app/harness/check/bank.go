package check

// The bank workload's resource kinds: one store of accounts each. A
// transfer moves an amount from one account to another on every store.
const (
	// ResBankPG is PostgreSQL's harness_bank rows: a transfer is one
	// transaction, logged in harness_bank_log in the same transaction.
	ResBankPG ResKind = "bank-pg"
	// ResBankEtcd is fence/etcd's Store: a transfer is two read-modify-
	// writes, one per account, each record holding its account's balance
	// and operations.
	ResBankEtcd ResKind = "bank-etcd"
	// ResBankS3 is fence/s3's Store, written as ResBankEtcd is.
	ResBankS3 ResKind = "bank-s3"
)

// BankKinds lists the bank's stores, in report order.
var BankKinds = []ResKind{ResBankPG, ResBankEtcd, ResBankS3}

// BankStart is every account's balance before the first transfer.
const BankStart = 100

// Transfer is a bank transfer on one store, as its invoke and done events
// carry it. Its legs are the debit of From (leg 0) and the credit of To
// (leg 1), each an operation with the transfer's ID on its account.
type Transfer struct {
	ID     string `json:"id"` // unique in the run; the same on every store
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amt"`
	// Acked and Tried say, on the done event, which legs may be in the
	// store: legs below Acked were acknowledged, legs from Tried on were
	// refused or never sent, and the legs in between have an unknown
	// outcome. A PostgreSQL transfer is one transaction: 0 and 0 refused,
	// 2 and 2 acknowledged, 0 and 2 unknown. On the invoke event (and so
	// for a worker that died before answering) they are 0 and 2.
	Acked int `json:"acked"`
	Tried int `json:"tried"`
}

// Leg returns the account and the signed amount of leg i: 0 the debit,
// 1 the credit.
func (t *Transfer) Leg(i int) (account string, amount int64) {
	if i == 0 {
		return t.From, -t.Amount
	}
	return t.To, t.Amount
}

// BankOp is one leg of a transfer as an account holds it: the transfer's
// ID and the amount it added (negative for a debit). The KV stores keep
// them in each account's record, as JSON.
type BankOp struct {
	ID     string `json:"id"`
	Amount int64  `json:"amt"`
}

// Ledger is one bank store as the harness read it: each account's balance
// and the operations applied to it, in the order applied. For PostgreSQL
// the operations come from harness_bank_log (two per logged transfer),
// for the KV stores from each account's record.
type Ledger struct {
	Balance map[string]int64
	Ops     map[string][]BankOp
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger {
	return &Ledger{Balance: map[string]int64{}, Ops: map[string][]BankOp{}}
}

// Kinds of bank [Violation], besides vioRefusedLand (a refused or unsent
// leg is in its account) and vioPhantom (an operation no transfer made, or
// with another amount than the transfer's): each is money lost, created
// or moved twice.
const (
	vioBankLost    ViolationKind = "lost-update"   // an acknowledged leg is not in its account
	vioBankBalance ViolationKind = "balance"       // a balance is not the start plus its account's operations
	vioBankTotal   ViolationKind = "total"         // the balances do not add up to the start plus half-applied legs
	vioBankTwice   ViolationKind = "applied-twice" // an account holds a transfer's operation twice
)
