package postgres

import (
	"database/sql"
	"os"
	"strings"
	"testing"
)

// literalDB connects to the test server, where tsvector and tsquery
// literals are checked; the tests skip without one.
func literalDB(t testing.TB) *sql.DB {
	t.Helper()
	u := os.Getenv("BELAY_TEST_POSTGRES_URL")
	if u == "" {
		t.Skip("BELAY_TEST_POSTGRES_URL is not set")
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// FuzzTSQuery: whatever a person types, the query built from it is a valid
// tsquery, and it matches a document of the same text.
func FuzzTSQuery(f *testing.F) {
	for _, s := range []string{`OC-41252`, `"`, `AND (`, `a | b`, `!x & y`, `x:*`, `a <-> b`, `'quoted'`, `\`, `\'`,
		`"" ""`, "\x00", "\xff\xfe", `🚀 über`, `a-b-c d_e`, `''`, `(((`, `+-*/`, `the how`, strings.Repeat("x", 3000)} {
		f.Add(s)
	}
	db := literalDB(f)
	f.Fuzz(func(t *testing.T, text string) {
		q := tsQuery(text)
		if q == "" {
			return
		}
		var match bool
		if err := db.QueryRowContext(t.Context(), `SELECT $1::tsvector @@ $2::tsquery`, searchDoc("", text, "", nil), q).Scan(&match); err != nil {
			t.Fatalf("tsQuery(%q) = %q: %v", text, q, err)
		}
		if !match {
			t.Errorf("tsQuery(%q) = %q does not match its own text", text, q)
		}
	})
}

// TestSearchDoc: documents are valid tsvectors whatever their text and
// size, and match the words of their fields, not phrases across them.
func TestSearchDoc(t *testing.T) {
	db := literalDB(t)
	var many strings.Builder
	for i := range 200000 {
		many.WriteString("w")
		many.WriteString(strings.Repeat("x", i%7))
		many.WriteString(string(rune('a' + i%26)))
		many.WriteString(string(rune('a' + i/26%26)))
		many.WriteString(string(rune('a' + i/676%26)))
		many.WriteString(" ")
	}
	for _, tc := range []struct {
		name  string
		doc   string
		query string
		want  bool
	}{
		{"identifier", searchDoc("", "Fixed OC-41252 today", "", nil), tsQuery("oc-41252"), true},
		{"diacritics", searchDoc("", "Über café", "", nil), tsQuery("uber CAFE"), true},
		{"description", searchDoc("", "", "users.table migration", nil), tsQuery("users"), true},
		{"tag", searchDoc("", "", "", []string{"auth-v2"}), tsQuery("auth"), true},
		{"not across fields", searchDoc("alpha", "beta", "", nil), tsQuery("alpha-beta"), false},
		{"not across tags", searchDoc("", "", "", []string{"alpha", "beta"}), tsQuery("alpha-beta"), false},
		{"long word", searchDoc("", strings.Repeat("y", 3000)+" after", "", nil), tsQuery("after"), true},
		{"repeated word", searchDoc("", strings.Repeat("again ", 20000)+"last", "", nil), tsQuery("again-again"), true},
		{"huge text", searchDoc("", many.String(), "'\\\x00", nil), tsQuery("waaa"), true},
		{"quotes", searchDoc(`it's`, `a\b`, "", nil), tsQuery(`it's`), true},
	} {
		var match bool
		if err := db.QueryRowContext(t.Context(), `SELECT $1::tsvector @@ $2::tsquery`, tc.doc, tc.query).Scan(&match); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		} else if match != tc.want {
			t.Errorf("%s: %q matches: %v, want %v", tc.name, tc.query, match, tc.want)
		}
	}
}
