module kvtier.local/pause

go 1.26
