package check

import (
	"strings"
	"testing"
)

// A control run proves something for a resource kind only if the checker
// caught a stale write landing on it: a control that caught some on every
// kind but one fails the verdict, naming that kind; lost-write or phantom
// violations catch no stale write. The summary counts violations per kind.
func TestVerdictControlPerKind(t *testing.T) {
	fenced := &Report{Seed: 3, Fenced: true, Writes: map[ResKind]*Counts{}}
	for _, k := range ResKinds {
		fenced.Writes[k] = &Counts{Accepted: 400, Refused: 1}
	}
	control := func(kinds ...ResKind) *Report {
		r := &Report{Seed: 3, Writes: map[ResKind]*Counts{}}
		for _, k := range ResKinds {
			r.Writes[k] = &Counts{}
		}
		for _, k := range kinds {
			r.Violations = append(r.Violations, vio(ResourceName(k, "s-k0"), vioTokenOrder, "token 1 after 2"))
		}
		r.Violations = append(r.Violations, vio(ResourceName(ResSQL, "s-k1"), vioLost, "w0/t1/s1"))
		return r
	}
	tests := []struct {
		name    string
		control *Report
		want    string // a substring of the one reason; none when ""
	}{
		{"every kind caught", control(ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis, ResJetStream, ResAzure), ""},
		{"jetstream missed", control(ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis, ResAzure), "no stale write caught on [jetstream]"},
		{"azblob missed", control(ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis, ResJetStream), "no stale write caught on [azblob]"},
		{"redis missed", control(ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResJetStream, ResAzure), "no stale write caught on [redis]"},
		{"sql missed", control(ResRow, ResTx, ResS3, ResEtcd, ResRedis, ResJetStream, ResAzure), "no stale write caught on [sql]"},
		{"etcd and sql missed", control(ResRow, ResTx, ResS3, ResRedis, ResJetStream, ResAzure), "no stale write caught on [etcd sql]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := Verdict(fenced, tt.control, Minimums{})
			switch {
			case tt.want == "" && len(why) != 0:
				t.Fatalf("Verdict: got %q, want none", why)
			case tt.want != "" && (len(why) != 1 || !strings.Contains(why[0], tt.want)):
				t.Fatalf("Verdict: got %q, want one reason with %q", why, tt.want)
			}
		})
	}
	// A run of some kinds only (the short preset's) needs catches on those.
	short := control(ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis)
	short.Workload = RegisterOf([]ResKind{ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis})
	if why := Verdict(fenced, short, Minimums{}); len(why) != 0 {
		t.Errorf("Verdict of a control of six kinds with a catch on each: got %q, want none", why)
	}
	var b strings.Builder
	PrintSummary(&b, fenced, control(ResEtcd))
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "control" && (f[1] == "etcd" || f[1] == "sql") && f[len(f)-1] != "1" {
			t.Errorf("summary row %q: want 1 violation in its last column", line)
		}
	}
}
