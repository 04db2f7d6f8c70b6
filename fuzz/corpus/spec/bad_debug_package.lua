return debug.getregistry() or package.loaded
