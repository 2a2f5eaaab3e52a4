package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/dlockdev/dlock/driver"
)

// durationFlag is a duration flag whose errors say what is wrong with the
// value: not a duration, or longer than a time.Duration holds (pflag's own
// says "invalid duration" for both).
type durationFlag struct{ d *time.Duration }

// durationVar defines a duration flag, as pflag's DurationVar does.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var(durationFlag{p}, name, usage)
}

func (v durationFlag) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationFlag) Set(s string) error {
	d, err := driver.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationFlag) Type() string { return "duration" }
