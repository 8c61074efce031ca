from fara_desktop.main import main

raise SystemExit(main())
