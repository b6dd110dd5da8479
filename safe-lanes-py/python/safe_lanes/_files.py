"""The file object of a checked upload source."""

import io


class Opened(io.FileIO):
    """A binary file object on exactly the file `UploadSource.open` checked.

    It reads through a duplicate of the checked descriptor: the file is never opened again by
    path, so a file swapped in after the check is not what is read. `path` is its canonical
    path, `root` the allowed root it lies in, `bytes` its size when it was checked. Close it
    (or use `with`); give it to `UploadDeposit.stage_source`, which stages the checked file
    from its first byte whatever was read here.
    """

    def __init__(self, checked):
        super().__init__(checked.reader_fd(), "rb", closefd=True)
        self._checked = checked
        self.name = str(checked.path)

    @property
    def path(self):
        return self._checked.path

    @property
    def root(self):
        return self._checked.root

    @property
    def bytes(self):
        return self._checked.bytes

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<safe_lanes.Opened {str(self._checked.path)!r} {state}>"
