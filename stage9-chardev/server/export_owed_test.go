package server

// Settles is how many times the daemon has had its driver give back for
// the owed charges (owed.go, settle): what refused calls cost it.
func (s *Server) Settles() uint64 { return s.settles.Load() }
