package pgstore_test

import (
	"context"
	"encoding/json"
	"log"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
)

// Transactional mode: the charge row and the stored response commit in one
// transaction. A crash before the commit leaves neither (the retry runs
// again); after it, both (the retry gets the replay). No duplicate charge,
// no lost one. TestTransactional and TestEndToEnd run this setup.
func Example_transactional() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS charges (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	mw, err := idempotency.New(idempotency.Options{Store: store, Transactional: true})
	if err != nil {
		log.Fatal(err)
	}
	createCharge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Amount int }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
			http.Error(w, "bad amount", http.StatusBadRequest) // 4xx: stored and replayed
			return
		}
		// The request's transaction, begun here: it commits with the stored
		// response.
		tx, err := pgstore.Tx(r.Context())
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		var id int64
		err = tx.QueryRow(r.Context(), `INSERT INTO charges (amount) VALUES ($1) RETURNING id`, in.Amount).Scan(&id)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // 5xx: rolled back, key freed
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]int64{"id": id})
	})
	http.Handle("POST /charges", mw.Handler(createCharge))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}
