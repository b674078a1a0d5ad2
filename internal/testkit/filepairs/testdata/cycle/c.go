package cycle

// C uses b's t's field and method-free names one way only.
func C() int { return t{f: 1}.f }
