module github.com/thindist/thindist

go 1.26.8
