// Service tests: see integration/ for end-to-end behaviour through the binary.
