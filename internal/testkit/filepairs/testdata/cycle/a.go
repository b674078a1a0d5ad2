package cycle

// A uses b's B, and b's B uses A: one two-way pair.
func A() int { return B() + c }

var c = 1
