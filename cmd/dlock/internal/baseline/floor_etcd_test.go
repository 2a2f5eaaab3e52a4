package baseline

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// etcdCall is a recorded gRPC call's arguments: its method, its request,
// and a new reply of its type.
type etcdCall struct {
	method   string
	req      proto.Message
	newReply func() proto.Message
}

// String is the call's method and request, for a log line.
func (c etcdCall) String() string { return c.method + " " + prototext.MarshalOptions{}.Format(c.req) }

// etcdRecorder records every unary call while rec is on.
func etcdRecorder(rec *recorder) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && rec.on.Load() {
			r := reply.(proto.Message)
			call := etcdCall{method, proto.Clone(req.(proto.Message)), func() proto.Message { return r.ProtoReflect().New().Interface() }}
			rec.mu.Lock()
			rec.msgs = append(rec.msgs, message{[]any{call}, etcdOutcome(r)})
			rec.mu.Unlock()
		}
		return err
	}
}

// etcdOutcome is what a reply says about the cycle: whether each
// transaction (and each one nested in it) took its success branch, and
// whether each delete deleted.
func etcdOutcome(m proto.Message) string {
	switch r := m.(type) {
	case *pb.TxnResponse:
		s := fmt.Sprintf("txn %v [", r.Succeeded)
		for _, op := range r.Responses {
			switch {
			case op.GetResponseTxn() != nil:
				s += etcdOutcome(op.GetResponseTxn()) + " "
			case op.GetResponseDeleteRange() != nil:
				s += etcdOutcome(op.GetResponseDeleteRange()) + " "
			case op.GetResponsePut() != nil:
				s += "put "
			case op.GetResponseRange() != nil:
				s += fmt.Sprintf("range %d ", len(op.GetResponseRange().Kvs))
			}
		}
		return s + "]"
	case *pb.DeleteRangeResponse:
		return fmt.Sprintf("deleted %d", r.Deleted)
	}
	return fmt.Sprintf("%T", m)
}

// ownCall is c with name made name/i in every key of its request.
func ownCall(c etcdCall, name string, i int) etcdCall {
	req := proto.Clone(c.req)
	replaceBytes(req.ProtoReflect(), []byte(name), fmt.Appendf(nil, "%s/%02d", name, i))
	return etcdCall{c.method, req, c.newReply}
}

// replaceBytes replaces old by new in every bytes field of m, nested
// messages and lists included.
func replaceBytes(m protoreflect.Message, old, new []byte) {
	type set struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var sets []set
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				if fd.Message() != nil {
					replaceBytes(l.Get(j).Message(), old, new)
				} else if fd.Kind() == protoreflect.BytesKind {
					l.Set(j, protoreflect.ValueOfBytes(bytes.ReplaceAll(l.Get(j).Bytes(), old, new)))
				}
			}
		case fd.Message() != nil:
			replaceBytes(v.Message(), old, new)
		case fd.Kind() == protoreflect.BytesKind:
			sets = append(sets, set{fd, protoreflect.ValueOfBytes(bytes.ReplaceAll(v.Bytes(), old, new))})
		}
		return true
	})
	for _, s := range sets {
		m.Set(s.fd, s.v)
	}
}

// TestEtcdRequestFloor replays an uncontended cycle's requests of dlock
// (its acquire and release transactions) and of the baseline
// (concurrency.Mutex's Lock and Unlock) on one gRPC connection with no
// other code (see floorSlice). It is skipped unless
// DLOCK_STATEMENT_FLOOR=1.
func TestEtcdRequestFloor(t *testing.T) {
	floorOn(t)
	etcdFloor(t, testserver.Etcd(t))
}

// etcdFloor records and replays both sides' cycles on srv.
func etcdFloor(t *testing.T, srv *testserver.EtcdServer) []FloorRow {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}
	newClient := func() *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(etcdRecorder(rec))}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	const ttl = 10 * time.Second
	l, err := etcdlock.Config{Prefix: etcdlock.DefaultPrefix, ElectionTimeout: srv.ElectionTimeout}.Locker(newClient())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A lease held throughout keeps the driver's shared etcd lease, which
	// the replayed puts name, from being revoked when the recorded cycle's
	// key goes.
	keep, err := l.TryAcquire(ctx, "floor-keep", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keep.Release(ctx) }()
	bc := newClient()
	m := &etcdMutex{cli: bc, ttl: int(math.Ceil(ttl.Seconds()))}
	if m.shared, err = concurrency.NewSession(bc, concurrency.WithTTL(m.ttl)); err != nil {
		t.Fatal(err)
	}
	defer m.shared.Close()
	dName, bName := "floor-dlock", "floor-base"
	d := rec.record(t, benchwork.TryAcquireRelease(l, dlock.WithTTL(ttl)), dName)
	b := rec.record(t, m.cycle, bName)
	replayer := newClient()
	send := func(args []any) (any, error) {
		c := args[0].(etcdCall)
		reply := c.newReply()
		if err := replayer.ActiveConnection().Invoke(ctx, c.method, c.req, reply); err != nil {
			return nil, err
		}
		return said(etcdOutcome(reply)), nil
	}
	return compareFloors(t, "etcd", d, b, dName, bName, nil, func() (func([]any) (any, error), func()) {
		return send, func() {}
	})
}
