package jsfence

// WithoutRecognition turns off s's recognition of its own writes by their
// ids (after a lost answer, and after a refusal by a copy of the write),
// for the controls of the fault tests.
func WithoutRecognition(s *Store) { s.noRecognise = true }
