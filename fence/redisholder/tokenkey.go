package redisholder

import "strings"

// tokenSuffix ends the name of a lock key's token counter.
const tokenSuffix = ":fencelock-token"

// TokenKey returns the default name of the counter that issues the
// tokens of the lock key key: in key's Redis Cluster hash slot, so that
// one script may touch both. A key with a hash tag ("{job}:lock") keeps
// it ("{job}:lock:fencelock-token"); one without is made the tag
// ("{job-lock}:fencelock-token"), unless it holds a "}", where the key
// and the counter may fall in different slots of a cluster (a single
// server does not mind): give such a lock [WithTokenKey].
func TokenKey(key string) string {
	if hasTag(key) || strings.Contains(key, "}") {
		return key + tokenSuffix
	}
	return "{" + key + "}" + tokenSuffix
}

// hasTag reports whether key has a Redis Cluster hash tag: a non-empty
// part between its first "{" and the first "}" after it.
func hasTag(key string) bool {
	_, after, ok := strings.Cut(key, "{")
	if !ok {
		return false
	}
	end := strings.IndexByte(after, '}')
	return end > 0
}
