module github.com/aifs/aifs

go 1.26
