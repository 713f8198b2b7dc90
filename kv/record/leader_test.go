package record

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// On an R3 bucket the leader read agrees with the direct get on a present
// key (value and revision), says "not found" for a missing, deleted or
// purged one, and Get keeps returning jetstream.ErrKeyNotFound for those.
func TestLeaderGetOnReplicatedBucket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servers, opts := bustest.Cluster(t, 3)
	nc, err := nats.Connect(bustest.URLs(servers), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, _, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{Bucket: "r3counters", History: 1, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	b := New[counter](kv, js, "counter")
	if !b.replicated(ctx) {
		t.Fatal("an R3 bucket reads as not replicated")
	}
	rev, err := b.Create(ctx, "c", &counter{N: 7})
	if err != nil {
		t.Fatal(err)
	}
	data, lrev, found, err := b.leaderGet(ctx, "c")
	if err != nil || !found || lrev != rev || string(data) != `{"n":7}` {
		t.Fatalf("leader get: %q rev %d found %v err %v; want {\"n\":7} rev %d", data, lrev, found, err, rev)
	}
	if _, _, found, err := b.leaderGet(ctx, "missing"); err != nil || found {
		t.Fatalf("leader get of a missing key: found %v err %v", found, err)
	}
	if _, _, err := b.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrKeyNotFound", err)
	}
	if err := kv.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := b.leaderGet(ctx, "c"); err != nil || found {
		t.Fatalf("leader get of a deleted key: found %v err %v", found, err)
	}
	if _, err := b.Create(ctx, "p", &counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, "p"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("Get of a purged key: %v, want ErrKeyNotFound", err)
	}
}

// A single-node bucket never asks the leader.
func TestSingleNodeBucketIsNotReplicated(t *testing.T) {
	b, ctx := open(t)
	if b.replicated(ctx) {
		t.Fatal("an R1 bucket reads as replicated")
	}
}
