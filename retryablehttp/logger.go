package retryablehttp

import (
	"fmt"
	"log"
	"os"
)

// Logger is a printf logger, as *log.Logger is.
type Logger interface {
	Printf(string, ...any)
}

// LeveledLogger is a logger with levels, each method taking a message and
// key-value pairs (hclog, or a wrapper of slog or zap).
type LeveledLogger interface {
	Error(msg string, keysAndValues ...any)
	Info(msg string, keysAndValues ...any)
	Debug(msg string, keysAndValues ...any)
	Warn(msg string, keysAndValues ...any)
}

// defaultLogger is NewClient's: standard error, with the date and time.
var defaultLogger = log.New(os.Stderr, "", log.LstdFlags)

// leveledPrintf makes a LeveledLogger a Logger for the log hooks, at Info.
type leveledPrintf struct{ LeveledLogger }

func (l leveledPrintf) Printf(format string, args ...any) { l.Info(fmt.Sprintf(format, args...)) }

// hookLogger is the logger the log hooks are given: the Client's, or nil.
func hookLogger(logger any) Logger {
	switch v := logger.(type) {
	case LeveledLogger:
		return leveledPrintf{v}
	case Logger:
		return v
	}
	return nil
}

// logf logs at debug or error level: printf loggers get the level as a
// prefix ("[DEBUG] "), leveled loggers the message and pairs.
func logf(logger any, debug bool, msg string, keysAndValues []any, format string, args ...any) {
	switch v := logger.(type) {
	case LeveledLogger:
		if debug {
			v.Debug(msg, keysAndValues...)
		} else {
			v.Error(msg, keysAndValues...)
		}
	case Logger:
		v.Printf(format, args...)
	}
}
