module github.com/dlockdev/dlock

go 1.26
