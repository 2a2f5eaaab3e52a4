package serve

import (
	"errors"
	"fmt"
)

// check refuses a Config the server cannot run safely with, saying why.
func (cfg *Config) check() error {
	if cfg.Locker == nil {
		return errors.New("serve: Config.Locker is nil")
	}
	if !cfg.InsecureNoAuth && !cfg.ClientCerts && len(cfg.Tokens) == 0 && len(cfg.AdminTokens) == 0 {
		return errors.New("serve: no client token given (Config.Tokens) and no client certificates (Config.ClientCerts); set InsecureNoAuth to serve without authentication")
	}
	for _, t := range append(append([]string{}, cfg.Tokens...), cfg.AdminTokens...) {
		if len(t) < 16 {
			return errors.New("serve: a token is shorter than 16 characters; use a random one (e.g. openssl rand -hex 32)")
		}
	}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return errors.New("serve: Config.TrustedProxies holds an invalid prefix (want e.g. netip.MustParsePrefix(\"10.0.0.0/8\"))")
		}
	}
	if len(cfg.LeaseKeys) > 0 {
		if err := cfg.Locker.CanResume(); err != nil {
			return fmt.Errorf("serve: cannot run as one of several replicas (lease keys given): %w; run a single server without lease keys", err)
		}
	}
	return nil
}

// defaults fills the limits left zero.
func (cfg *Config) defaults() {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MaxConnsPerClient <= 0 {
		cfg.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if cfg.MaxDashboardStreams <= 0 {
		cfg.MaxDashboardStreams = DefaultMaxDashboardStreams
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
}
