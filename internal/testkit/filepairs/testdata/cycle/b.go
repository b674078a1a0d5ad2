package cycle

type t struct{ f int }

// B uses A of a.go.
func B() int { return (&t{}).f + len(x) }

var x = "x"

func init() { _ = A }
