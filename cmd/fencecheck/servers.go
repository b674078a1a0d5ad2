package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// versionedBucket is the bucket the command creates on a versitygw it started.
const versionedBucket = "fencecheck-versioned"

// startServers starts (or finds, from the environment) PostgreSQL and an S3
// server, and returns where they are and how to stop them.
func startServers() (harness.Servers, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(ctx)
	if err != nil {
		return harness.Servers{}, nil, err
	}
	_, dsn, err := pg.CreateDatabase(ctx)
	if err != nil {
		return harness.Servers{}, nil, errors.Join(err, pg.Close())
	}
	dir, err := os.MkdirTemp("", "fencecheck-s3-")
	if err != nil {
		return harness.Servers{}, nil, errors.Join(err, pg.Close())
	}
	s3srv, err := s3test.Start(ctx, dir)
	stop := func() { _ = pg.Close(); _ = os.RemoveAll(dir) }
	if err != nil {
		stop()
		return harness.Servers{}, nil, err
	}
	stop = func() { _ = s3srv.Close(); _ = pg.Close(); _ = os.RemoveAll(dir) }
	cfg := s3srv.Config
	if os.Getenv(s3test.EnvBucket) == "" {
		cfg.Bucket = versionedBucket
	}
	if err := harness.EnsureVersionedBucket(ctx, cfg); err != nil {
		stop()
		return harness.Servers{}, nil, err
	}
	return harness.Servers{PostgresDSN: dsn, S3: cfg}, stop, nil
}
