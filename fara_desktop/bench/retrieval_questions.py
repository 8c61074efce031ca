"""The retrieval benchmark's question sets: each question with the file that answers it and a phrase the answering
passage holds (a hit counts when it comes from that file and holds that phrase).

Two corpora that every machine running the tests has: the Python standard library's sources (this interpreter's,
~32 MB), and the READMEs of the Python packages installed next to the app (their ``METADATA`` files, ~1 MB).
The second set was written for this benchmark: half of its questions share the words of their answer, half are
paraphrased so that they share almost none (what a person asks without knowing the document's vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """A question, the file (its name's end) that answers it, and a phrase the answering passage holds."""

    text: str
    file: str
    phrase: str
    paraphrased: bool = False


STDLIB_QUESTIONS = tuple(
    Question(*row)
    for row in (
        ("How does json escape non-ASCII characters when ensure_ascii is true?", "json/encoder.py", "ensure_ascii"),
        ("What does shutil.rmtree do with the onerror callback?", "shutil.py", "onerror"),
        ("How is heappush implemented in the heap queue algorithm?", "heapq.py", "def heappush"),
        ("What timeout does socket create_connection use by default?", "socket.py", "def create_connection"),
        ("How does textwrap dedent remove common leading whitespace?", "textwrap.py", "def dedent"),
        ("How does lru_cache build its cache key from the arguments?", "functools.py", "_make_key"),
        ("What does Path mkdir do with parents and exist_ok?", "pathlib.py", "exist_ok"),
        ("How does SequenceMatcher compute the similarity ratio?", "difflib.py", "def ratio"),
        ("How are urlsafe base64 strings decoded?", "base64.py", "urlsafe_b64decode"),
        ("How does the csv Sniffer guess the delimiter?", "csv.py", "_guess_delimiter"),
        ("What does gather do when return_exceptions is true?", "asyncio/tasks.py", "return_exceptions"),
        ("How does zipfile check the CRC of an extracted member?", "zipfile.py", "crc"),
    )
)

# Sharing the answer's words.
_DIRECT = (
    ("Does load_dotenv override existing environment variables?", "python_dotenv.md", "override=False"),
    ("What is the overhead per iteration of tqdm?", "tqdm.md", "60ns per iteration"),
    ("Is h11 a bring-your-own-I/O library?", "h11.md", "bring-your-own-I/O"),
    ("Where is the keyringrc.cfg config file stored?", "keyring.md", "keyringrc.cfg"),
    ("How does psutil cpu_count count only physical CPUs?", "psutil.md", "logical=False"),
    ("What is user_data_dir on Linux with PlatformDirs?", "platformdirs.md", "user_data_dir"),
    ("Which pypdf extra is needed for AES encryption?", "pypdf.md", "pypdf[crypto]"),
    ("What does pip install uvicorn[standard] install?", "uvicorn.md", "uvloop"),
    ("How do I install llama-cpp-python with OpenBLAS using CMAKE_ARGS?", "llama_cpp_python.md", "OpenBLAS"),
    ("How do I download a file with hf_hub_download?", "huggingface_hub.md", "hf_hub_download"),
    ("What does vulture --min-confidence 100 report?", "vulture.md", "min-confidence 100"),
    ("Why can pytest use plain assert statements?", "pytest.md", "assertion introspection"),
    ("What is the qtbot fixture of pytest-qt for?", "pytest_qt.md", "qtbot"),
    ("Is the UTS #46 compatibility mapping applied by idna by default?", "idna.md", "UTS #46"),
    ("Is DiskCache thread-safe and process-safe?", "diskcache.md", "process-safe"),
    ("How do I use AsyncOpenAI for asynchronous requests?", "openai.md", "AsyncOpenAI"),
)
# Paraphrased: few words in common with the answer.
_PARAPHRASED = (
    (
        "If a variable is already defined in my shell, will reading the settings file clobber it?",
        "python_dotenv.md",
        "not override",
    ),
    ("How much does the progress meter slow down each step of a loop?", "tqdm.md", "60ns"),
    ("Which HTTP library leaves reading and writing the socket entirely to me?", "h11.md", "no IO code"),
    ("How can I find out where the password vault library keeps its settings?", "keyring.md", "keyring diagnose"),
    ("How do I learn how many real cores the machine has, not hyperthreads?", "psutil.md", "logical=False"),
    ("How can I get the words out of a PDF in Python?", "pypdf.md", "extract_text"),
    ("How do I get the speedier compiled event loop and HTTP parser for the web server?", "uvicorn.md", "httptools"),
    (
        "How do I make the bindings use an optimised linear algebra library for matrix maths?",
        "llama_cpp_python.md",
        "OpenBLAS",
    ),
    ("How do I fetch just one file of a model repository to my machine?", "huggingface_hub.md", "hf_hub_download"),
    (
        "How do I make the unused-function finder show only the findings it is certain about?",
        "vulture.md",
        "min-confidence",
    ),
    ("How quick is the Rust linter compared with the older Python linters?", "ruff.md", "10-100x"),
    ("How do I press a button of a widget from a test?", "pytest_qt.md", "mouseClick"),
    ("How do I break a long sequence into groups of n items?", "more_itertools.md", "chunked"),
    ("How can my tool skip the same files Git would leave out?", "pathspec.md", "gitignore"),
    (
        "Can several programs share the same on-disk cache at once without corrupting it?",
        "diskcache.md",
        "process-safe",
    ),
    ("How do I call the chat API with await?", "openai.md", "AsyncOpenAI"),
    ("Which library lets the same async code run on either event loop implementation?", "anyio.md", "Trio"),
    ("How do I see how long a loop still has to go while it runs?", "tqdm.md", "remaining"),
)
README_QUESTIONS = tuple(Question(*row) for row in _DIRECT) + tuple(
    Question(*row, paraphrased=True) for row in _PARAPHRASED
)
