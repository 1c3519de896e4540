"""Writers: each turns typed records into one artifact format on disk, atomically."""
