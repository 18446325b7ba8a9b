package eventstore

// Limits bound what one append may carry; a backend's options take them
// (pebblestore.Options.Limits, pgstore.Options.Limits). The zero value of
// a field means its default. An append that breaks a limit is refused
// before anything is written, with a *LimitError.
type Limits struct {
	MaxStreamIDBytes int // default 256
	MaxTypeBytes     int // default 256
	MaxTagBytes      int // default 128
	MaxTags          int // per event, default 16
	MaxEventBytes    int // data + type + tags + metadata (keys and values) of one event, default 1 MiB
	MaxAppendBytes   int // all events of one append, default 16 MiB
	MaxAppendEvents  int // default 10,000
}

// defaultLimits are the limits used when a backend is given none.
var defaultLimits = Limits{
	MaxStreamIDBytes: 256,
	MaxTypeBytes:     256,
	MaxTagBytes:      128,
	MaxTags:          16,
	MaxEventBytes:    1 << 20,
	MaxAppendBytes:   16 << 20,
	MaxAppendEvents:  10_000,
}

// WithDefaults fills unset fields with the defaults: the limits a store
// given l enforces.
func (l Limits) WithDefaults() Limits {
	d := defaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxStreamIDBytes, d.MaxStreamIDBytes)
	set(&l.MaxTypeBytes, d.MaxTypeBytes)
	set(&l.MaxTagBytes, d.MaxTagBytes)
	set(&l.MaxTags, d.MaxTags)
	set(&l.MaxEventBytes, d.MaxEventBytes)
	set(&l.MaxAppendBytes, d.MaxAppendBytes)
	set(&l.MaxAppendEvents, d.MaxAppendEvents)
	return l
}
