package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/fence"
)

// exitRegressed is check's status for a token etcd never issued.
const exitRegressed = 1

func newCheckCmd(g *globals) *cobra.Command {
	var token int64
	cmd := &cobra.Command{
		Use:   "check --token N",
		Short: "Check a resource's highest accepted token against etcd's revision",
		Long: `check compares N, the highest fencing token a resource has accepted (e.g.
SELECT max(fence) FROM ..., or the token in a refused write's error), with
etcd's current revision. Every token is a revision, so a token above it was
never issued by this cluster: etcd was replaced by a new cluster, or
restored from a snapshot taken before the token, and hands out lower tokens
than the resource has accepted. Every holder's writes are then refused as
stale although no newer holder exists. Run it after a restore, or when
refusals look wrong; docs/restore.md says what to do.

Exit status: 0 when etcd has issued tokens up to N; 1 when N is beyond
etcd's revision (it prints how far, and the bump a restore needs); 69 when
etcd cannot be reached; 64 for bad usage.`,
		Example: `  fencelock check --token 1234567   # e.g. SELECT max(fence) FROM reports`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				return bad("check: --token is required (a resource's highest accepted token)")
			}
			return checkToken(cmd.Context(), g, fence.Token(token), cmd.OutOrStdout())
		},
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the resource's highest accepted token (required)")
	return cmd
}

func checkToken(ctx context.Context, g *globals, token fence.Token, out io.Writer) error {
	if token <= 0 {
		return bad("check: --token %d: must be positive", token)
	}
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer closeLocks()
	tc, err := locks.CheckToken(ctx, token)
	if errors.Is(err, fence.ErrInvalidToken) {
		return bad("check: %v", err)
	}
	if err != nil {
		return fail(exitUnavailable, "%v", err)
	}
	if tc.Issued {
		fmt.Fprintf(out, "ok: etcd is at revision %d; token %d is within what it has issued.\n", tc.Revision, token)
		return nil
	}
	return fail(exitRegressed, "token %d is above etcd's revision %d: etcd was replaced or restored from an earlier snapshot, "+
		"and every holder's writes to this resource will be refused until etcd's revision passes %d. "+
		"Restore again with etcdutl snapshot restore --bump-revision %d --mark-compacted (or more), or see docs/restore.md",
		token, tc.Revision, token, restoreBump(token))
}

// restoreBump is a --bump-revision that clears token whatever snapshot is
// restored: etcdutl adds it to the snapshot's revision, which is at least
// 1, so the token plus a margin of a million. The gap to the current
// revision is no measure of it: a cluster that was itself restored with a
// bump, or that ran on since, is past the snapshot it would be restored
// from again.
func restoreBump(token fence.Token) int64 { return int64(token) + 1_000_000 }
