package demo

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// naiveEtcd is a plain key (Put if absent, with an etcd lease only when a
// TTL is asked for) and a plain Delete.
type naiveEtcd struct{ c *clientv3.Client }

func openNaiveEtcd(u *url.URL) (naiveStore, error) {
	cfg := clientv3.Config{Endpoints: strings.Split(u.Host, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("demo: etcd: %w", err)
	}
	return &naiveEtcd{c}, nil
}

func (s *naiveEtcd) What() string { return "a plain etcd key" }
func (s *naiveEtcd) Close() error { return s.c.Close() }

func (s *naiveEtcd) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var opts []clientv3.OpOption
	if ttl > 0 {
		l, err := s.c.Grant(ctx, max(int64((ttl+time.Second-1)/time.Second), 1))
		if err != nil {
			return false, err
		}
		opts = append(opts, clientv3.WithLease(l.ID))
	}
	resp, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, opts...)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (s *naiveEtcd) Del(ctx context.Context, key string) error {
	_, err := s.c.Delete(ctx, key)
	return err
}

func (s *naiveEtcd) Get(ctx context.Context, key string) (string, bool, error) {
	resp, err := s.c.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}
