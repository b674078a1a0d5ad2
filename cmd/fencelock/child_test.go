package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// testChild is a child command of the tests', run by fencelock: "pgwrite"
// reports READY in $READY_FILE, waits for $GO_FILE, then writes job $JOB
// with $FENCELOCK_TOKEN (fenced unless $UNFENCED is set) and reports the
// outcome in $RESULT_FILE: "ok", "stale" or "error: ...".
func testChild(what string) int {
	if what != "pgwrite" {
		fmt.Fprintln(os.Stderr, "unknown test child", what)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := strconv.ParseInt(os.Getenv("FENCELOCK_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FENCELOCK_TOKEN:", err)
		return 2
	}
	conn, err := pgx.Connect(ctx, os.Getenv("DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close(context.Background())
	os.WriteFile(os.Getenv("READY_FILE"), []byte(strconv.FormatInt(tok, 10)), 0o644)
	for {
		if _, err := os.Stat(os.Getenv("GO_FILE")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	job := os.Getenv("JOB")
	if os.Getenv("UNFENCED") != "" {
		_, err = conn.Exec(ctx, "UPDATE jobs SET holder = 'A', fence = $2 WHERE id = $1", job, tok)
	} else {
		var jobs *postgres.Table
		if jobs, err = postgres.NewTable(pgx.Identifier{"jobs"}, postgres.WithKeyColumn("id")); err == nil {
			err = jobs.Update(ctx, conn, job, fence.Token(tok), postgres.Set("holder", "A"))
		}
	}
	res := "ok"
	switch {
	case errors.Is(err, fence.ErrStale):
		res = "stale"
	case err != nil:
		res = "error: " + err.Error()
	}
	os.WriteFile(os.Getenv("RESULT_FILE"), []byte(res), 0o644)
	return 0
}
