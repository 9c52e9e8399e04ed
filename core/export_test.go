package core

import "github.com/belayhq/belay/store"

// StoreOf hands tests the store behind a service, to look under the rules.
func StoreOf(s *Service) store.Store { return s.store }
