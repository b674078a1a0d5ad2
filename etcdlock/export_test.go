package etcdlock

// UnconditionalReleaseForTest reverts fix 1 of the request-fault hardening
// for the property test's control run: cleanups and Unlock delete whatever
// key is in their slot, not only the one with their create revision.
var UnconditionalReleaseForTest = &unconditionalRelease
