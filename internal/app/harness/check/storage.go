package check

// Record is one write as the storage recorded it.
type Record struct {
	Token int64
	Value string
}

// Storage is the storage's own record of a run: for each resource (see
// [ResourceName]), the writes it accepted in commit order, and the value it
// holds at the end.
type Storage struct {
	Writes map[string][]Record
	Final  map[string]string
}

// NewStorage returns an empty Storage.
func NewStorage() *Storage {
	return &Storage{Writes: map[string][]Record{}, Final: map[string]string{}}
}
