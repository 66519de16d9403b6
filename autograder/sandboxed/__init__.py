"""What runs beside student code: the worker, which imports the student's mytorch inside the
sandbox and answers the judge with arrays, and the confinement it applies to itself (Landlock,
seccomp). Nothing here may import the judge's rooms; the judge copies this folder, and only this
folder, into the sandbox."""
