package idempotency

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Store keeps idempotency records. Keys arrive already scoped and hashed
// (hex SHA-256 of scope and key), so a Store need not escape or bound them.
//
// Four operations, each atomic on its own, are all the middleware needs; a
// backend (DynamoDB, etcd, ...) that can do a conditional put, a
// conditional update and a conditional delete can implement it, and the
// storetest package checks that it does.
type Store interface {
	// Claim takes key for owner, as an in-flight record with fingerprint
	// that expires after lock, unless a live record already holds the key.
	// It returns nil when owner holds the claim, and the live record
	// otherwise. Expired records count as absent. Exactly one of many
	// concurrent Claims of a free key may succeed.
	//
	// Claim is idempotent per owner: a live in-flight record that owner
	// already holds is owner's (nil), so a Claim sent again after its reply
	// was lost (a network client resends it) does not lock the key against
	// its own request.
	Claim(ctx context.Context, p ClaimParams) (*Record, error)

	// Extend moves owner's in-flight claim's expiry to lock from now, while
	// its handler still runs. It returns ErrNotOwner if owner no longer
	// holds the claim.
	Extend(ctx context.Context, p ExtendParams) error

	// Complete replaces owner's in-flight record with the final response,
	// kept for retention. It returns ErrNotOwner if owner no longer holds
	// the claim (its lock expired and another request took it).
	Complete(ctx context.Context, p CompleteParams) error

	// Release deletes owner's in-flight record so that a retry can run. It
	// does nothing if owner no longer holds it, so a slow request never
	// releases a claim that a newer one holds.
	Release(ctx context.Context, p ReleaseParams) error
}

// The parameters of the Store's operations, as structs so that adjacent
// strings cannot be swapped silently and an operation can grow.
type (
	// ClaimParams are Claim's: take Key for Owner, as an in-flight record
	// with Fingerprint that expires after Lock.
	ClaimParams struct {
		Key, Fingerprint, Owner string
		Lock                    time.Duration
	}
	// ExtendParams are Extend's: Owner's claim on Key expires Lock from now.
	ExtendParams struct {
		Key, Owner string
		Lock       time.Duration
	}
	// CompleteParams are Complete's: Owner's claim on Key becomes
	// Response, kept for Retention.
	CompleteParams struct {
		Key, Owner string
		Response   *Response
		Retention  time.Duration
	}
	// ReleaseParams are Release's: Owner's claim on Key is deleted.
	ReleaseParams struct{ Key, Owner string }
	// BeginParams are TxStore.Begin's: a transaction for Owner's claim on
	// Key.
	BeginParams struct{ Key, Owner string }
)

// TxStore is a Store that can run the handler inside a transaction that
// also stores the response, so that the handler's own writes and the
// stored response commit or roll back together. Options.Transactional asks
// for it.
type TxStore interface {
	Store
	// Begin prepares a transaction for owner's claim on key and returns a
	// context that carries it, for the handler to write through. A store
	// may open the transaction lazily, on the handler's first use of it.
	Begin(ctx context.Context, p BeginParams) (Tx, context.Context, error)
}

// Tx is a transaction opened by TxStore.Begin.
type Tx interface {
	// Commit stores resp as Complete would, in the transaction, and
	// commits. On any error the transaction is rolled back.
	Commit(ctx context.Context, resp *Response, retention time.Duration) error
	// Rollback abandons the transaction; it is safe after Commit.
	Rollback(ctx context.Context) error
}

// Record is what a Store holds for a key.
type Record struct {
	// Fingerprint identifies the request that claimed the key.
	Fingerprint string
	// Response is the final response, or nil while the request is in
	// flight.
	Response *Response
	// Expires is when the record expires: for an in-flight record, when
	// its claim frees itself unless extended. Zero if the store does not
	// know.
	Expires time.Time

	cached bool // answered by the replay cache, not the store
}

// Response is a stored response.
type Response struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	// TooLarge marks a response whose body exceeded
	// Options.MaxResponseBytes: the effect happened, but the body was not
	// kept, so replays answer 500 with an explanation instead.
	TooLarge bool `json:"too_large,omitempty"`
}

// ErrClaimLapsed is the cause of a handler's (or a Runner's fn's) context
// when its claim could not be extended for nearly LockTimeout: the store
// did not answer (a partition, a stall) or failed, and the claim may lapse
// before the work ends, so that a retry elsewhere can take the key. The
// work should stop before its side effect; see the package doc for what
// holds when it does not.
var ErrClaimLapsed = errors.New("idempotency: claim could not be extended in time; another request may take the key")

// ErrNotOwner reports that a claim was lost: its lock expired and another
// request took the key, or the request completed or released it already.
var ErrNotOwner = errors.New("idempotency: claim no longer held by this request")
