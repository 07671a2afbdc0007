package s3

// SetListPageSize makes List fetch n keys per request, to test pagination
// without writing a thousand objects.
func SetListPageSize(s *Store, n int) { s.listMaxKeys = n }
