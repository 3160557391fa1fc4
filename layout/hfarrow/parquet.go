package hfarrow

// openParquet is to come: Parquet files are refused until then.
func openParquet(s *Scanner) (source, error) {
	return nil, s.errorf("Parquet is not read yet; index the Arrow cache of load_dataset")
}
