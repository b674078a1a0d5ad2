package testenv

import "syscall"

// tmpfsMagic is TMPFS_MAGIC (statfs(2)).
const tmpfsMagic = 0x01021994

// roomyTmpfs reports whether dir is a writable tmpfs with minFree free.
func roomyTmpfs(dir string) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil || st.Type != tmpfsMagic || st.Bavail*uint64(st.Bsize) < minFree {
		return false
	}
	return syscall.Access(dir, 2 /* W_OK */) == nil
}

// alive reports whether process pid exists (or may: only ESRCH says not).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err != syscall.ESRCH
}
