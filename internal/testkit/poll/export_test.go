package poll

// UntilWithin is until, for the package's test.
var UntilWithin = until
