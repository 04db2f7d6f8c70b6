"""The package's exceptions: AtkError carries a status of enum atk_status
(kernels/atk.h) and the library's message; LibraryNotFound says where
libatk.so was looked for."""


class AtkError(RuntimeError):
    """A call into libatk failed: .status is the atk_status code (e.g. 2 for
    ATK_ERR_USAGE, 12 for ATK_ERR_MISS), str() the library's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class LibraryNotFound(ImportError):
    """libatk.so could not be loaded; .tried lists each place looked and why
    it failed (the message lists them too)."""

    def __init__(self, message, tried=()):
        super().__init__(message)
        self.tried = list(tried)
