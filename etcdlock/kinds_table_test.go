package etcdlock

import "testing"

// Every kind has a complete row in the one kind table, and no two kinds
// share a name (the fencelock.kind attribute tells them apart).
func TestKindTable(t *testing.T) {
	names := map[string]kind{}
	for k := range numKinds {
		row := kindTable[k]
		if row.name == "" || row.ended == nil || row.waitSpan == "" || row.trySpan == "" || row.releaseSpan == "" {
			t.Errorf("kind %d: incomplete row %+v", k, row)
		}
		if other, ok := names[row.name]; ok {
			t.Errorf("kinds %d and %d are both named %q", other, k, row.name)
		}
		names[row.name] = k
	}
}
