package gormfence

// PluginSharingPoolForTest is a Plugin whose fenced updates outside a
// transaction run on the *sql.DB, as before dedicate: on PostgreSQL a
// lost answer is sent again there, for the control of
// TestFencedAnswerLostPostgreSQL.
var PluginSharingPoolForTest = Plugin{sharedPool: true}
